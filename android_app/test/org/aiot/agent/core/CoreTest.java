package org.aiot.agent.core;

import java.io.File;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * JVM tests of the app's core (no JUnit: plain checks, one test per argument, "ok NAME" on
 * success, exit 1 with the reason otherwise). Run by tests/app/test_app_core.py.
 */
public final class CoreTest {
    private CoreTest() {
    }

    public static void main(String[] args) throws Exception {
        List<String> names = args.length > 0 ? Arrays.asList(args) : Arrays.asList(
                "relay", "env_cwd", "many_lines", "timeout", "disconnect", "stop", "start_failed",
                "spec", "bad_spec", "chunks", "placeholders", "env_unset");
        int failed = 0;
        for (String name : names) {
            try {
                CoreTest.class.getDeclaredMethod(name).invoke(null);
                System.out.println("ok " + name);
            } catch (java.lang.reflect.InvocationTargetException ex) {
                failed++;
                System.out.println("FAIL " + name + ": " + ex.getCause());
            }
        }
        System.exit(failed == 0 ? 0 : 1);
    }

    private static void check(boolean condition, String what) {
        if (!condition) {
            throw new AssertionError(what);
        }
    }

    private static RunSpec sh(String script, long timeoutMs) {
        return new RunSpec(Arrays.asList("/bin/sh", "-c", script), Collections.<String, String>emptyMap(),
                null, timeoutMs);
    }

    /** Collects lines; optionally fails (the host went away) after {@code failAfter} lines. */
    static final class ListSink implements LineSink {
        final List<String> lines = Collections.synchronizedList(new ArrayList<String>());
        final int failAfter;

        ListSink(int failAfter) {
            this.failAfter = failAfter;
        }

        @Override
        public void line(String line) throws IOException {
            if (lines.size() >= failAfter) {
                throw new IOException("status pipe closed");
            }
            lines.add(line);
        }
    }

    private static boolean alive(String pid) {
        File stat = new File("/proc/" + pid + "/stat");
        if (!stat.exists()) {
            return false;
        }
        try {  // a zombie is dead too
            String text = new String(java.nio.file.Files.readAllBytes(stat.toPath()), "UTF-8");
            return !text.substring(text.lastIndexOf(')') + 2).startsWith("Z");
        } catch (IOException gone) {
            return false;
        }
    }

    private static void waitDead(String pid) throws InterruptedException {
        for (int i = 0; i < 100 && alive(pid); i++) {
            Thread.sleep(50);
        }
        check(!alive(pid), "child " + pid + " still alive");
    }

    static void relay() {
        ListSink sink = new ListSink(Integer.MAX_VALUE);
        Outcome out = new AgentRunner(sh("echo '{\"v\": 1, \"event\": \"hello\"}'; echo human; "
                + "echo oops >&2; exit 3", 10000), sink).run();
        check(Outcome.EXITED.equals(out.reason), "reason " + out);
        check(out.exitCode != null && out.exitCode.intValue() == 3, "exit " + out);
        check(sink.lines.equals(Arrays.asList("{\"v\": 1, \"event\": \"hello\"}", "human")), "lines " + sink.lines);
        check(out.lines == 2, "count " + out);
        check(out.stderrTail.contains("oops"), "stderr " + out.stderrTail);
    }

    static void env_cwd() {
        Map<String, String> env = new HashMap<String, String>();
        env.put("AIOT_X", "a b'c");
        ListSink sink = new ListSink(Integer.MAX_VALUE);
        RunSpec spec = new RunSpec(Arrays.asList("/bin/sh", "-c", "echo \"$AIOT_X\"; pwd"), env, "/tmp", 10000);
        Outcome out = new AgentRunner(spec, sink).run();
        check(out.exitCode != null && out.exitCode.intValue() == 0, "exit " + out);
        check(sink.lines.equals(Arrays.asList("a b'c", "/tmp")), "lines " + sink.lines);
    }

    static void many_lines() {
        ListSink sink = new ListSink(Integer.MAX_VALUE);
        Outcome out = new AgentRunner(sh("i=0; while [ $i -lt 5000 ]; do echo line$i; i=$((i+1)); done", 30000),
                sink).run();
        check(sink.lines.size() == 5000 && "line4999".equals(sink.lines.get(4999)), "got " + sink.lines.size());
        check(out.exitCode != null && out.exitCode.intValue() == 0, "exit " + out);
    }

    static void timeout() throws Exception {
        ListSink sink = new ListSink(Integer.MAX_VALUE);
        long start = System.currentTimeMillis();
        Outcome out = new AgentRunner(sh("echo $$; exec sleep 30", 400), sink).run();
        long took = System.currentTimeMillis() - start;
        check(Outcome.TIMEOUT.equals(out.reason), "reason " + out);
        check(took < 5000, "took " + took + " ms");
        check(sink.lines.size() == 1, "lines " + sink.lines);
        waitDead(sink.lines.get(0));
    }

    static void disconnect() throws Exception {
        ListSink sink = new ListSink(1);
        long start = System.currentTimeMillis();
        Outcome out = new AgentRunner(sh("echo $$; echo second; exec sleep 30", 60000), sink).run();
        check(Outcome.DISCONNECTED.equals(out.reason), "reason " + out);
        check(System.currentTimeMillis() - start < 5000, "not killed promptly");
        waitDead(sink.lines.get(0));
    }

    static void stop() throws Exception {
        final ListSink sink = new ListSink(Integer.MAX_VALUE);
        final AgentRunner runner = new AgentRunner(sh("echo $$; exec sleep 30", 60000), sink);
        Thread stopper = new Thread(new Runnable() {
            @Override
            public void run() {
                while (sink.lines.isEmpty()) {
                    Thread.yield();
                }
                runner.stop();
            }
        });
        stopper.start();
        Outcome out = runner.run();
        stopper.join();
        check(Outcome.STOPPED.equals(out.reason), "reason " + out);
        waitDead(sink.lines.get(0));
    }

    static void start_failed() {
        RunSpec spec = new RunSpec(Arrays.asList("/nonexistent/aiot/python3"), Collections.<String, String>emptyMap(),
                null, 1000);
        Outcome out = new AgentRunner(spec, new ListSink(Integer.MAX_VALUE)).run();
        check(Outcome.START_FAILED.equals(out.reason), "reason " + out);
        check(out.exitCode == null, "exit " + out);
        check(out.detail != null && out.detail.contains("/nonexistent/aiot/python3"), "detail " + out.detail);
    }

    static void spec() {
        RunSpec spec = RunSpec.parse("{\"argv\": [\"/data/local/tmp/aiot/py\", \"-m\", \"device_agent\","
                + " \"a \\\"q\\\" \\u00e9\\n\"], \"env\": {\"PYTHONPATH\": \"/x\"}, \"cwd\": \"/data\","
                + " \"timeout_ms\": 1500, \"extra\": [1, 2.5, true, null, {}]}");
        check(spec.argv.size() == 4 && spec.argv.get(3).equals("a \"q\" \u00e9\n"), "argv " + spec.argv);
        check("/x".equals(spec.env.get("PYTHONPATH")), "env " + spec.env);
        check("/data".equals(spec.cwd) && spec.timeoutMs == 1500, "cwd/timeout");
        RunSpec bare = RunSpec.parse("{\"argv\": [\"true\"]}");
        check(bare.timeoutMs == RunSpec.DEFAULT_TIMEOUT_MS && bare.cwd == null && bare.env.isEmpty(), "defaults");
    }

    static void bad_spec() {
        String[] bad = {"", "[]", "{\"argv\": []}", "{\"argv\": [1]}", "{\"argv\": \"x\"}",
            "{\"argv\": [\"x\"], \"timeout_ms\": 0}", "{\"argv\": [\"x\"]", "{\"argv\": [\"x\"]} x"};
        for (String text : bad) {
            try {
                RunSpec.parse(text);
                throw new AssertionError("accepted " + text);
            } catch (IllegalArgumentException expected) {
                // refused, as it should be
            }
        }
    }

    static void chunks() {
        StringBuilder line = new StringBuilder();
        for (int i = 0; i < 40000; i++) {
            line.append((char) ('a' + i % 26));
        }
        List<String> parts = StatusLines.chunks(line.toString());
        check(parts.size() == 3, "parts " + parts.size());
        StringBuilder joined = new StringBuilder();
        for (String part : parts) {
            check(part.length() <= StatusLines.CHUNK, "chunk too long");
            joined.append(part);
        }
        check(joined.toString().equals(line.toString()), "rejoined");
        check(StatusLines.chunks("").size() == 1, "empty line");
        check(StatusLines.oneLine("a\nb\\c").equals("a\\nb\\\\c"), "oneLine");
    }

    static void placeholders() {
        RunSpec spec = RunSpec.parse("{\"argv\": [\"{native_lib_dir}/libaiot_ld_ab.so\", \"--library-path\","
                + " \"{files_dir}/rt/lib:{files_dir}/rt/usr/lib\", \"{other}\"], \"env\": {\"T\": \"{cache_dir}/t\","
                + " \"LD_PRELOAD\": null}, \"cwd\": \"{files_dir}\"}");
        Map<String, String> dirs = new HashMap<String, String>();
        dirs.put("native_lib_dir", "/data/app/x/lib/arm64");
        dirs.put("files_dir", "/data/user/0/org.aiot.agent/files");
        dirs.put("cache_dir", "/data/user/0/org.aiot.agent/cache");
        RunSpec out = spec.expand(dirs);
        check(out.argv.equals(Arrays.asList("/data/app/x/lib/arm64/libaiot_ld_ab.so", "--library-path",
                "/data/user/0/org.aiot.agent/files/rt/lib:/data/user/0/org.aiot.agent/files/rt/usr/lib",
                "{other}")), "argv " + out.argv);
        check("/data/user/0/org.aiot.agent/cache/t".equals(out.env.get("T")), "env " + out.env);
        check(out.env.containsKey("LD_PRELOAD") && out.env.get("LD_PRELOAD") == null, "null kept " + out.env);
        check("/data/user/0/org.aiot.agent/files".equals(out.cwd), "cwd " + out.cwd);
    }

    static void env_unset() {
        Map<String, String> env = new HashMap<String, String>();
        env.put("HOME", null);  // inherited from this JVM, removed for the child
        env.put("AIOT_Y", "1");
        ListSink sink = new ListSink(Integer.MAX_VALUE);
        RunSpec spec = new RunSpec(Arrays.asList("/bin/sh", "-c", "echo \"${HOME-unset}:$AIOT_Y\""), env, null, 10000);
        Outcome out = new AgentRunner(spec, sink).run();
        check(out.exitCode != null && out.exitCode.intValue() == 0, "exit " + out);
        check(sink.lines.equals(Arrays.asList("unset:1")), "lines " + sink.lines);
    }
}
