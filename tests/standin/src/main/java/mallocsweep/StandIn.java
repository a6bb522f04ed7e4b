package mallocsweep;

import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.MongoVersion;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;
import de.bwaldvogel.mongo.bson.Document;
import io.netty.channel.Channel;
import java.io.FileWriter;
import java.io.IOException;
import java.io.PrintWriter;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CountDownLatch;

/**
 * A MongoDB wire-protocol stand-in that takes mongod's command line, so that mallocsweep's MongoDB
 * path (start, readiness by ping, inserts through pymongo, the shutdown command, wait4) runs
 * against a real process on a machine without mongod.
 *
 * <p>It is NOT MongoDB: an in-memory mongo-java-server under the JVM's own allocator. buildInfo
 * says so ({@code allocator: "jvm"}, {@code mallocsweepStandIn: true}) so that nothing downstream
 * can mistake its figures for a real server's.
 */
public final class StandIn {

    /** Options that take a value and that a real mongod would honour; the stand-in ignores them. */
    private static final Set<String> IGNORED_WITH_VALUE =
            Set.of("--dbpath", "--wiredTigerCacheSizeGB", "--unixSocketPrefix", "--setParameter");

    /** Flags without a value that the stand-in accepts and ignores. */
    private static final Set<String> IGNORED_FLAGS = Set.of("--nounixsocket", "--quiet");

    /**
     * pymongo 4.x refuses servers below wire version 9 (MongoDB 4.4); the library's own enum stops
     * at 4.0, so the stand-in announces 4.4. Only the commands the tests use are relied upon.
     */
    private static final MongoVersion ANNOUNCED =
            new MongoVersion() {
                @Override
                public List<Integer> getVersionArray() {
                    return List.of(4, 4, 0);
                }

                @Override
                public int getWireVersion() {
                    return 9;
                }
            };

    private StandIn() {}

    static String libraryVersion() {
        String v = StandIn.class.getPackage().getImplementationVersion();
        return v == null ? "unknown" : v;
    }

    /** Memory backend plus the two commands a mongod has and the library lacks or says too little in. */
    static final class Backend extends MemoryBackend {
        private final CountDownLatch shutdown;

        Backend(CountDownLatch shutdown) {
            this.shutdown = shutdown;
        }

        @Override
        public Document handleCommand(Channel channel, String db, String command, Document query) {
            if (command.equalsIgnoreCase("shutdown")) {
                // Like mongod: acknowledge nothing, just go. The client sees the connection drop.
                shutdown.countDown();
                return new Document("ok", 1.0);
            }
            Document reply = super.handleCommand(channel, db, command, query);
            if (command.equalsIgnoreCase("buildinfo")) {
                reply.put("allocator", "jvm");
                reply.put("mallocsweepStandIn", true);
                reply.put("standInLibrary", "mongo-java-server " + libraryVersion());
            }
            return reply;
        }
    }

    private static void usage(String why) {
        System.err.println("mongod stand-in: " + why);
        System.err.println("usage: mongod-standin --port N [--bind_ip HOST] [--logpath FILE]"
                + " [--pidfilepath FILE] [--dbpath DIR] [--wiredTigerCacheSizeGB G] [--nounixsocket]"
                + " | --version");
        System.exit(2);
    }

    public static void main(String[] args) throws Exception {
        String host = "127.0.0.1";
        int port = -1;
        String logpath = null;
        String pidfile = null;
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            String value = null;
            int eq = arg.indexOf('=');
            if (arg.startsWith("--") && eq > 0) {
                value = arg.substring(eq + 1);
                arg = arg.substring(0, eq);
            }
            if (arg.equals("--version")) {
                // The shape of mongod's own --version: first line "db version v...", then build info.
                System.out.println("db version standin-" + libraryVersion());
                System.out.println("Build Info: {\"allocator\": \"jvm\", \"mallocsweepStandIn\": true,"
                        + " \"standInLibrary\": \"mongo-java-server " + libraryVersion() + "\"}");
                return;
            }
            if (IGNORED_FLAGS.contains(arg)) {
                continue;
            }
            boolean known = arg.equals("--port") || arg.equals("--bind_ip") || arg.equals("--logpath")
                    || arg.equals("--pidfilepath") || IGNORED_WITH_VALUE.contains(arg);
            if (!known) {
                usage("unknown option " + args[i]);
            }
            if (value == null) {
                if (i + 1 >= args.length) {
                    usage(arg + " needs a value");
                }
                value = args[++i];
            }
            switch (arg) {
                case "--port" -> port = Integer.parseInt(value);
                case "--bind_ip" -> host = value;
                case "--logpath" -> logpath = value;
                case "--pidfilepath" -> pidfile = value;
                default -> { }
            }
        }
        if (port <= 0) {
            usage("--port is required");
        }

        CountDownLatch shutdown = new CountDownLatch(1);
        Backend backend = new Backend(shutdown);
        backend.version(ANNOUNCED);
        MongoServer server = new MongoServer(backend);
        server.bind(host, port);
        if (pidfile != null) {
            // Like mongod: the pid, so that `mallocsweep doctor` finds a stand-in left by a killed run.
            // The wrapper exec'd the JVM, so this is the pid our caller launched and reaps.
            try (PrintWriter w = new PrintWriter(new FileWriter(pidfile, false))) {
                w.println(ProcessHandle.current().pid());
            }
        }
        log(logpath, "mongod stand-in (mongo-java-server " + libraryVersion() + ", NOT MongoDB)"
                + " listening on " + host + ":" + port);
        // SIGTERM runs the hooks: close sockets, then the JVM exits 143 like any signalled process.
        Runtime.getRuntime().addShutdownHook(new Thread(server::shutdownNow));
        shutdown.await();
        log(logpath, "shutdown command received");
        server.shutdownNow();
        System.exit(0);
    }

    private static void log(String logpath, String line) throws IOException {
        if (logpath == null) {
            System.out.println(line);
            System.out.flush();
            return;
        }
        try (PrintWriter w = new PrintWriter(new FileWriter(logpath, true))) {
            w.println(line);
        }
    }
}
