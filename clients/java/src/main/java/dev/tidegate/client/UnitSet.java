package dev.tidegate.client;

import java.util.ArrayList;
import java.util.List;

/** A set of units written as {@code 25-49,60}: sorted, non-overlapping inclusive ranges. */
public final class UnitSet {
    private final int[] lo;
    private final int[] hi;
    private final String text;

    private UnitSet(int[] lo, int[] hi, String text) {
        this.lo = lo;
        this.hi = hi;
        this.text = text;
    }

    public static final UnitSet EMPTY = new UnitSet(new int[0], new int[0], "");

    /** Parses {@code text} for a table of {@code units} units, as strictly as the server. */
    public static UnitSet parse(String text, int units) throws DecodeException {
        List<int[]> ranges = new ArrayList<>();
        for (String raw : text.split(",", -1)) {
            String part = raw.trim();
            if (part.isEmpty()) {
                continue;
            }
            int dash = part.indexOf('-');
            long a;
            long b;
            if (dash >= 0) {
                a = number(part.substring(0, dash), part);
                b = number(part.substring(dash + 1), part);
            } else {
                a = number(part, part);
                b = a;
            }
            if (a > b) {
                throw new DecodeException("unit range `" + part + "` is backwards");
            }
            if (b >= units) {
                throw new DecodeException("unit " + b + " is outside the " + units + " units");
            }
            ranges.add(new int[] {(int) a, (int) b});
        }
        if (ranges.isEmpty()) {
            throw new DecodeException("empty unit set `" + text + "`");
        }
        ranges.sort((x, y) -> x[0] != y[0] ? Integer.compare(x[0], y[0]) : Integer.compare(x[1], y[1]));
        int[] lo = new int[ranges.size()];
        int[] hi = new int[ranges.size()];
        for (int i = 0; i < ranges.size(); i++) {
            lo[i] = ranges.get(i)[0];
            hi[i] = ranges.get(i)[1];
            if (i > 0 && lo[i] <= hi[i - 1]) {
                throw new DecodeException("unit ranges overlap at " + lo[i]);
            }
        }
        return new UnitSet(lo, hi, text);
    }

    private static long number(String s, String part) throws DecodeException {
        String t = s.trim();
        if (t.isEmpty() || t.length() > 10 || !t.chars().allMatch(c -> c >= '0' && c <= '9')) {
            throw new DecodeException("unit set syntax: `" + part + "`");
        }
        return Long.parseLong(t);
    }

    public boolean contains(int unit) {
        int a = 0;
        int b = lo.length - 1;
        while (a <= b) {
            int m = (a + b) >>> 1;
            if (unit < lo[m]) {
                b = m - 1;
            } else if (unit > hi[m]) {
                a = m + 1;
            } else {
                return true;
            }
        }
        return false;
    }

    public boolean isEmpty() {
        return lo.length == 0;
    }

    @Override
    public String toString() {
        return text;
    }
}
