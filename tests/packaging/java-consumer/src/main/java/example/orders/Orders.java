package example.orders;

import dev.tidegate.client.Headers;
import dev.tidegate.client.RoutingTable;
import dev.tidegate.client.Tag;
import dev.tidegate.client.WriteCheck;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * The packaging check's consumer of the Java client: decodes a fixed routing table
 * (tests/fixtures/routing_base.json), tags users with it and runs the write check, using only
 * the client's public API.
 */
public final class Orders {
    private record Case(String user, String zone, Long incoming, WriteCheck want) {}

    public static void main(String[] args) throws Exception {
        System.out.println(run(Path.of(args.length > 0 ? args[0] : "../../fixtures/routing_base.json")));
    }

    /**
     * Tags a pinned user and an unpinned one and checks writes: the pinned user's zone owns their
     * writes, another zone is told the owner, a caller newer than the table is answered behind.
     * Returns a summary line; throws on any unexpected answer.
     */
    public static String run(Path table) throws Exception {
        RoutingTable t = RoutingTable.decode(Files.readString(table));
        Tag alice = t.tag("alice"); // pinned to red (az-c) in the fixture
        if (!alice.pinned() || !alice.lane().equals("red") || !alice.zone().equals("az-c")) {
            throw new AssertionError("alice tagged " + alice + ", want the pin red/az-c");
        }
        Tag user = t.tag("user-42");
        List<Case> cases = List.of(
                new Case("alice", "az-c", alice.version(), WriteCheck.OWNED),
                new Case("alice", "az-a", alice.version(), WriteCheck.MISROUTED),
                new Case("alice", "az-c", alice.version() + 1, WriteCheck.BEHIND),
                new Case("user-42", user.zone(), null, WriteCheck.OWNED));
        for (Case c : cases) {
            RoutingTable.WriteAnswer a = t.checkWrite(RoutingTable.DEFAULT_DOMAIN, c.user(), c.zone(), c.incoming());
            if (a.check() != c.want()) {
                throw new AssertionError("write check of " + c.user() + " in " + c.zone() + " at " + c.incoming()
                        + ": " + a.check() + ", want " + c.want());
            }
            if (c.want() == WriteCheck.MISROUTED && !"az-c".equals(a.ownerZone())) {
                throw new AssertionError("misrouted write of alice names owner " + a.ownerZone() + ", want az-c");
            }
        }
        return "java consumer: version " + t.version() + ", alice -> " + alice.lane() + "/" + alice.zone()
                + " (pin), user-42 -> " + user.lane() + "/" + user.zone() + " unit " + user.unit()
                + ", headers " + Headers.headersFor(user) + ", " + cases.size() + " write checks as expected";
    }
}
