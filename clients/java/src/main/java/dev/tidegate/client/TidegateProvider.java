package dev.tidegate.client;

import dev.openfeature.sdk.EvaluationContext;
import dev.openfeature.sdk.FeatureProvider;
import dev.openfeature.sdk.ImmutableMetadata;
import dev.openfeature.sdk.Metadata;
import dev.openfeature.sdk.ProviderEvaluation;
import dev.openfeature.sdk.Reason;
import dev.openfeature.sdk.Value;
import dev.openfeature.sdk.exceptions.FlagNotFoundError;
import dev.openfeature.sdk.exceptions.GeneralError;
import dev.openfeature.sdk.exceptions.InvalidContextError;
import dev.openfeature.sdk.exceptions.ProviderNotReadyError;
import dev.openfeature.sdk.exceptions.TargetingKeyMissingError;
import dev.openfeature.sdk.exceptions.TypeMismatchError;

/**
 * An OpenFeature in-process provider over a {@link Router}: the flag {@code tidegate-color}
 * (as the coordinator's and edge's OFREP endpoints name it) evaluates to the user's lane locally,
 * with no call per evaluation. The targeting key is the user ID; the context attributes
 * {@code service} and {@code domain} select a release channel and a routing domain. The answer
 * is the same as OFREP's: value and variant the lane, reason {@code SPLIT} (the unit map or a
 * channel decided) or {@code TARGETING_MATCH} (a pin), metadata {@code version}, {@code zone},
 * {@code unit}, {@code pinned}.
 */
public final class TidegateProvider implements FeatureProvider {
    public static final String FLAG_KEY = "tidegate-color";

    private final Router router;
    private final String flagKey;

    public TidegateProvider(Router router) {
        this(router, FLAG_KEY);
    }

    public TidegateProvider(Router router, String flagKey) {
        this.router = router;
        this.flagKey = flagKey;
    }

    @Override
    public Metadata getMetadata() {
        return () -> "tidegate in-process";
    }

    @Override
    public ProviderEvaluation<String> getStringEvaluation(String key, String defaultValue, EvaluationContext ctx) {
        if (!flagKey.equals(key)) {
            throw new FlagNotFoundError("flag `" + key + "` is not tidegate's (`" + flagKey + "`)");
        }
        String user = ctx == null ? null : ctx.getTargetingKey();
        if (user == null || user.isEmpty()) {
            throw new TargetingKeyMissingError("the context has no targeting key (the user ID)");
        }
        String service = attribute(ctx, "service");
        String domain = attribute(ctx, "domain");
        Tag tag;
        try {
            tag = router.tagInDomain(user, domain, service);
        } catch (TagException e) {
            switch (e.code()) {
                case "no_table" -> throw new ProviderNotReadyError(e.getMessage());
                case "invalid_user_id", "unknown_domain" -> throw new InvalidContextError(e.getMessage());
                default -> throw new GeneralError(e.getMessage());
            }
        }
        return ProviderEvaluation.<String>builder()
                .value(tag.lane())
                .variant(tag.lane())
                .reason((tag.pinned() ? Reason.TARGETING_MATCH : Reason.SPLIT).toString())
                .flagMetadata(ImmutableMetadata.builder()
                        .addLong("version", tag.version())
                        .addString("zone", tag.zone())
                        .addInteger("unit", tag.unit())
                        .addBoolean("pinned", tag.pinned())
                        .addString("rule", tag.reason())
                        .build())
                .build();
    }

    private static String attribute(EvaluationContext ctx, String name) {
        Value v = ctx.getValue(name);
        return v == null || !v.isString() ? null : v.asString();
    }

    @Override
    public ProviderEvaluation<Boolean> getBooleanEvaluation(String key, Boolean defaultValue, EvaluationContext ctx) {
        throw mismatch(key, "boolean");
    }

    @Override
    public ProviderEvaluation<Integer> getIntegerEvaluation(String key, Integer defaultValue, EvaluationContext ctx) {
        throw mismatch(key, "integer");
    }

    @Override
    public ProviderEvaluation<Double> getDoubleEvaluation(String key, Double defaultValue, EvaluationContext ctx) {
        throw mismatch(key, "double");
    }

    @Override
    public ProviderEvaluation<Value> getObjectEvaluation(String key, Value defaultValue, EvaluationContext ctx) {
        throw mismatch(key, "object");
    }

    private RuntimeException mismatch(String key, String type) {
        if (!flagKey.equals(key)) {
            return new FlagNotFoundError("flag `" + key + "` is not tidegate's (`" + flagKey + "`)");
        }
        return new TypeMismatchError("`" + flagKey + "` is a string flag (the lane), not " + type);
    }
}
