package dev.tidegate.ofrep;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.openfeature.contrib.providers.ofrep.OfrepProvider;
import dev.openfeature.contrib.providers.ofrep.OfrepProviderOptions;
import dev.openfeature.sdk.Client;
import dev.openfeature.sdk.EvaluationContext;
import dev.openfeature.sdk.FlagEvaluationDetails;
import dev.openfeature.sdk.ImmutableContext;
import dev.openfeature.sdk.OpenFeatureAPI;
import java.io.BufferedWriter;
import java.io.File;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * Evaluates flags through the official OpenFeature Java SDK and the OFREP provider.
 *
 * <p>usage: {@code java -cp 'lib/*' dev.tidegate.ofrep.Main BASE_URL CASES_JSON}. CASES_JSON holds
 * {@code [{"flag": KEY, "targetingKey": USER or null}, ...]}; prints one JSON line per case, in
 * order, with the SDK's evaluation details (value, variant, reason, error_code, metadata).
 */
public final class Main {
    private static final ObjectMapper JSON = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        String baseUrl = args[0];
        JsonNode cases = JSON.readTree(new File(args[1]));
        OpenFeatureAPI api = OpenFeatureAPI.getInstance();
        api.setProviderAndWait(OfrepProvider.constructProvider(
                OfrepProviderOptions.builder().baseUrl(baseUrl).build()));
        Client client = api.getClient();

        // Like a web application: several threads evaluating at once, through one provider.
        ExecutorService pool = Executors.newFixedThreadPool(8);
        List<Future<String>> answers = new ArrayList<>();
        for (JsonNode c : cases) {
            answers.add(pool.submit(() -> evaluate(client, c)));
        }
        try (BufferedWriter out =
                new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8))) {
            for (Future<String> answer : answers) {
                out.write(answer.get());
                out.write('\n');
            }
        }
        pool.shutdown();
        api.shutdown();
    }

    private static String evaluate(Client client, JsonNode c) throws Exception {
        JsonNode key = c.get("targetingKey");
        EvaluationContext context = key == null || key.isNull()
                ? new ImmutableContext()
                : new ImmutableContext(key.asText());
        FlagEvaluationDetails<String> d =
                client.getStringDetails(c.get("flag").asText(), "no-colour", context);
        ObjectNode answer = JSON.createObjectNode();
        answer.put("value", d.getValue());
        answer.put("variant", d.getVariant());
        answer.put("reason", d.getReason());
        answer.put("error_code", d.getErrorCode() == null ? null : d.getErrorCode().name());
        answer.set("metadata", d.getFlagMetadata() == null
                ? JSON.createObjectNode()
                : JSON.valueToTree(d.getFlagMetadata().asUnmodifiableMap()));
        return JSON.writeValueAsString(answer);
    }
}
