package dev.tidegate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.openfeature.sdk.Client;
import dev.openfeature.sdk.ErrorCode;
import dev.openfeature.sdk.FlagEvaluationDetails;
import dev.openfeature.sdk.MutableContext;
import dev.openfeature.sdk.OpenFeatureAPI;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The in-process provider answers what the coordinator's own OFREP endpoint answers. */
class OpenFeatureProviderTest {
    @Test
    void theInProcessProviderAgreesWithOfrep(@TempDir Path dir) throws Exception {
        try (TidegateServer server = TidegateServer.start(dir, TidegateServer.config("", ""))) {
            RouterFollowTest.dial(server, 35);
            server.ok("PUT", "/v1/pins/user-3", TagAgreementTest.obj().put("color", "green")
                    .put("expected_version", server.version()).put("reason", "t"));
            long version = server.version();
            try (Router router = Router.connect(server.url, new Router.Identity("java-of", "az-a", "service"),
                    new Router.Options().token(TidegateServer.SERVICE_TOKEN))) {
                assertTrue(router.waitForVersion(version, Duration.ofSeconds(20)));
                OpenFeatureAPI api = OpenFeatureAPI.getInstance();
                api.setProviderAndWait("tidegate-java-test", new TidegateProvider(router));
                Client client = api.getClient("tidegate-java-test");
                int agreed = 0;
                for (int i = 0; i < 1000; i++) {
                    String user = "user-" + i;
                    FlagEvaluationDetails<String> ours = client.getStringDetails(TidegateProvider.FLAG_KEY, "none",
                            new MutableContext(user));
                    JsonNode theirs = server.ok("POST", "/ofrep/v1/evaluate/flags/tidegate-color",
                            TagAgreementTest.obj().set("context", TagAgreementTest.obj().put("targetingKey", user)));
                    assertEquals(theirs.get("value").asText(), ours.getValue(), user);
                    assertEquals(theirs.get("variant").asText(), ours.getVariant(), user);
                    assertEquals(theirs.get("reason").asText(), ours.getReason(), user);
                    assertEquals(theirs.get("metadata").get("zone").asText(), ours.getFlagMetadata().getString("zone"), user);
                    assertEquals(theirs.get("metadata").get("version").asLong(), ours.getFlagMetadata().getLong("version"), user);
                    agreed++;
                }
                FlagEvaluationDetails<String> missing = client.getStringDetails(TidegateProvider.FLAG_KEY, "none", new MutableContext());
                assertEquals(ErrorCode.TARGETING_KEY_MISSING, missing.getErrorCode());
                assertEquals("none", missing.getValue());
                FlagEvaluationDetails<String> other = client.getStringDetails("other-flag", "none", new MutableContext("u"));
                assertEquals(ErrorCode.FLAG_NOT_FOUND, other.getErrorCode());
                System.out.println("[figures] OpenFeature in-process provider: " + agreed
                        + " evaluations agree with POST /ofrep/v1/evaluate/flags/tidegate-color (value, variant, reason, zone, version)");
            }
        }
    }
}
