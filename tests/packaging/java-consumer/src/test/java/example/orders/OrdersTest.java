package example.orders;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import org.junit.jupiter.api.Test;

class OrdersTest {
    @Test
    void tagsAndChecksWritesWithTheInstalledClient() throws Exception {
        String summary = Orders.run(Path.of(System.getProperty("orders.table")));
        System.out.println(summary);
        assertTrue(summary.startsWith("java consumer: version 8, alice -> red/az-c"), summary);
    }
}
