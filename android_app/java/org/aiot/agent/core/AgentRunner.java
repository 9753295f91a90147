package org.aiot.agent.core;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.lang.reflect.Method;
import java.nio.charset.Charset;
import java.util.Map;

/**
 * Starts the child a {@link RunSpec} names and relays its stdout lines to a {@link LineSink}
 * until it exits, runs past its timeout, the sink fails (the host went away) or {@link #stop()}
 * is called (the instrumentation is being torn down); in the last three cases the child is
 * killed, so no agent keeps measuring for nobody.
 *
 * <p>Only APIs of Android 6 (API 23) and Java 8 are used (no lambdas: dx rejects invokedynamic
 * below min-sdk 26; no {@code Process.waitFor(long, TimeUnit)}: API 26), so the same class runs
 * in the app and in the JVM tests on the host.
 */
public final class AgentRunner {
    /** How often the runner checks the child, the clock and the stop flag. */
    static final long POLL_MS = 20;
    /** After a kill, how long to wait before the forcible kill (SIGKILL). */
    static final long KILL_GRACE_MS = 2000;
    /** After the child ended, how long stdout may still drain into the sink. */
    static final long DRAIN_MS = 5000;
    /** The stderr kept for the outcome (the end of it: where errors are). */
    static final int STDERR_TAIL_CHARS = 4000;

    private static final Charset UTF8 = Charset.forName("UTF-8");

    private final RunSpec spec;
    private final LineSink sink;
    private volatile boolean stopRequested;
    private volatile boolean sinkFailed;
    private volatile String sinkError;
    private volatile int relayed;

    public AgentRunner(RunSpec spec, LineSink sink) {
        this.spec = spec;
        this.sink = sink;
    }

    /** Ask the running child to be killed (any thread; the run returns soon after). */
    public void stop() {
        stopRequested = true;
    }

    /** Starts the child and relays its lines until it ends; never throws for the child's sake. */
    public Outcome run() {
        if (stopRequested) {
            return new Outcome(null, Outcome.STOPPED, "stopped before start", "", 0);
        }
        ProcessBuilder builder = new ProcessBuilder(spec.argv);
        Map<String, String> environment = builder.environment();
        for (Map.Entry<String, String> entry : spec.env.entrySet()) {
            if (entry.getValue() == null) {
                environment.remove(entry.getKey());  // e.g. LD_PRELOAD: bionic's must not reach glibc
            } else {
                environment.put(entry.getKey(), entry.getValue());
            }
        }
        if (spec.cwd != null) {
            builder.directory(new File(spec.cwd));
        }
        final Process process;
        try {
            process = builder.start();
        } catch (IOException ex) {
            return new Outcome(null, Outcome.START_FAILED, ex.getMessage(), "", 0);
        }
        TailReader stderr = new TailReader(process.getErrorStream());
        Thread stderrThread = new Thread(stderr, "aiot-stderr");
        stderrThread.setDaemon(true);
        stderrThread.start();
        Thread relay = new Thread(new Relay(process.getInputStream(), process), "aiot-relay");
        relay.setDaemon(true);
        relay.start();

        String reason = Outcome.EXITED;
        String detail = null;
        long deadline = System.currentTimeMillis() + spec.timeoutMs;
        Integer code = exitCode(process);
        while (code == null) {
            if (stopRequested) {
                reason = Outcome.STOPPED;
            } else if (sinkFailed) {
                reason = Outcome.DISCONNECTED;
                detail = sinkError;
            } else if (System.currentTimeMillis() > deadline) {
                reason = Outcome.TIMEOUT;
                detail = "ran over " + spec.timeoutMs + " ms";
            }
            if (!Outcome.EXITED.equals(reason)) {
                code = kill(process);
                break;
            }
            sleep(POLL_MS);
            code = exitCode(process);
        }
        join(relay, DRAIN_MS);
        join(stderrThread, 500);
        if (Outcome.EXITED.equals(reason) && sinkFailed) {
            reason = Outcome.DISCONNECTED;  // it exited, but not every line reached the host
            detail = sinkError;
        }
        return new Outcome(code, reason, detail, stderr.tail(), relayed);
    }

    /** The exit code, or null while it runs (API 23 has no Process.isAlive). */
    static Integer exitCode(Process process) {
        try {
            return Integer.valueOf(process.exitValue());
        } catch (IllegalThreadStateException running) {
            return null;
        }
    }

    /** Kill the child: destroy() (SIGKILL on Android, SIGTERM on a JVM), then forcibly. */
    static Integer kill(Process process) {
        process.destroy();
        long until = System.currentTimeMillis() + KILL_GRACE_MS;
        Integer code = exitCode(process);
        while (code == null && System.currentTimeMillis() < until) {
            sleep(POLL_MS);
            code = exitCode(process);
        }
        if (code == null) {
            try {  // Java 8 and Android 8+; absent on older Android, where destroy() was SIGKILL
                Method forcibly = Process.class.getMethod("destroyForcibly");
                forcibly.invoke(process);
            } catch (Exception ignored) {
                // nothing stronger is available
            }
            try {
                code = Integer.valueOf(process.waitFor());
            } catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
            }
        }
        return code;
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
        }
    }

    private static void join(Thread thread, long ms) {
        try {
            thread.join(ms);
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
        }
    }

    /** Copies stdout lines to the sink; a failing sink marks the host as gone. */
    private final class Relay implements Runnable {
        private final InputStream stream;
        private final Process process;

        Relay(InputStream stream, Process process) {
            this.stream = stream;
            this.process = process;
        }

        @Override
        public void run() {
            BufferedReader reader = new BufferedReader(new InputStreamReader(stream, UTF8));
            try {
                String line;
                while ((line = reader.readLine()) != null) {
                    if (sinkFailed) {
                        continue;  // drain, so the child never blocks on a full pipe
                    }
                    try {
                        sink.line(line);
                        relayed++;
                    } catch (IOException ex) {
                        sinkError = String.valueOf(ex.getMessage());
                        sinkFailed = true;
                        process.destroy();  // do not wait for the next poll
                    }
                }
            } catch (IOException ended) {
                // the child's stdout closed under us: it was killed
            } finally {
                try {
                    reader.close();
                } catch (IOException ignored) {
                    // nothing to do
                }
            }
        }
    }

    /** Keeps the last {@link #STDERR_TAIL_CHARS} characters of a stream. */
    private static final class TailReader implements Runnable {
        private final InputStream stream;
        private final StringBuilder tail = new StringBuilder();

        TailReader(InputStream stream) {
            this.stream = stream;
        }

        @Override
        public void run() {
            InputStreamReader reader = new InputStreamReader(stream, UTF8);
            char[] buffer = new char[4096];
            try {
                int n;
                while ((n = reader.read(buffer)) > 0) {
                    synchronized (tail) {
                        tail.append(buffer, 0, n);
                        if (tail.length() > 2 * STDERR_TAIL_CHARS) {
                            tail.delete(0, tail.length() - STDERR_TAIL_CHARS);
                        }
                    }
                }
            } catch (IOException ended) {
                // killed
            }
        }

        String tail() {
            synchronized (tail) {
                int from = Math.max(0, tail.length() - STDERR_TAIL_CHARS);
                return tail.substring(from);
            }
        }
    }
}
