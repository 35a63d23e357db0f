package dev.tidegate.client;

/** A routing table (or watch event) the client refuses: malformed, or of a form it does not know. */
public final class DecodeException extends Exception {
    public DecodeException(String message) {
        super("routing table JSON: " + message);
    }
}
