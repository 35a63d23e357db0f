package dev.tidegate.client;

/**
 * The lane route header {@code tg} the Rust lane producer writes on every record: one colour
 * byte ({@code b} blue, {@code g} green, else the zone index 2-63) and the routing version as an
 * unsigned LEB128 varint. Blue at version 12 is {@code 62 0c}; green at 300 is {@code 67 ac 02}.
 */
public final class RouteHeader {
    public static final String NAME = "tg";
    /**
     * The header of a switch marker: a record without key or value that a lane producer writes to
     * every partition when it moves to a new routing version, before its first message at that
     * version. Its value is a {@code tg} value (the colour of the partition's range and the
     * version); the producer's messages after it carry no header. {@link LaneConsumer} skips
     * markers.
     */
    public static final String SWITCH = "tgs";

    private RouteHeader() {}

    /** The zone index and routing version a record was routed with. */
    public record Route(int zone, long version) {}

    public static byte[] encode(int zone, long version) {
        byte[] buf = new byte[11];
        buf[0] = (byte) (zone == 0 ? 'b' : zone == 1 ? 'g' : zone);
        int len = 1;
        long rest = version;
        while (Long.compareUnsigned(rest, 0x80) >= 0) {
            buf[len++] = (byte) ((rest & 0x7f) | 0x80);
            rest >>>= 7;
        }
        buf[len++] = (byte) rest;
        return java.util.Arrays.copyOf(buf, len);
    }

    /** Decodes a {@code tg} value; throws IllegalArgumentException saying why it does not decode. */
    public static Route decode(byte[] value) {
        if (value == null || value.length == 0) {
            throw new IllegalArgumentException("the route header is empty; expected a colour byte and a version");
        }
        int c = value[0] & 0xff;
        int zone = c == 'b' ? 0 : c == 'g' ? 1 : (c >= 2 && c <= 63 ? c : -1);
        if (zone < 0) {
            throw new IllegalArgumentException(String.format("the route header's colour byte is 0x%02x", c));
        }
        long version = 0;
        int shift = 0;
        for (int i = 1; i < value.length; i++) {
            int b = value[i] & 0xff;
            if (shift > 63 || (shift == 63 && (b & 0x7e) != 0)) {
                throw new IllegalArgumentException("the route header's version does not fit in 64 bits");
            }
            version |= (long) (b & 0x7f) << shift;
            if ((b & 0x80) == 0) {
                if (i != value.length - 1) {
                    throw new IllegalArgumentException("the route header has " + (value.length - 1 - i) + " byte(s) after its version");
                }
                return new Route(zone, version);
            }
            shift += 7;
        }
        throw new IllegalArgumentException("the route header's version ends in the middle of its varint");
    }
}
