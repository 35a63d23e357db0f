package dev.tidegate.client;

/**
 * A user the table cannot tag. {@link #code()} is the server's error code for the same case:
 * {@code invalid_user_id}, {@code channel_unavailable}, {@code unknown_domain} or
 * {@code no_table}.
 */
public final class TagException extends Exception {
    private final String code;

    public TagException(String code, String message) {
        super(message);
        this.code = code;
    }

    public String code() {
        return code;
    }
}
