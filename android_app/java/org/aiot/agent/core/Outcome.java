package org.aiot.agent.core;

/** How a child ended: its exit code (null if it never started) and why the runner let go. */
public final class Outcome {
    /** It exited by itself. */
    public static final String EXITED = "exited";
    /** It ran past the spec's timeout and was killed. */
    public static final String TIMEOUT = "timeout";
    /** The instrumentation was stopped (or the JVM shut down) and the child was killed. */
    public static final String STOPPED = "stopped";
    /** The sink failed (the host went away) and the child was killed. */
    public static final String DISCONNECTED = "host disconnected";
    /** The program could not be started (no such file, permission denied, SELinux). */
    public static final String START_FAILED = "start failed";

    public final Integer exitCode;
    public final String reason;
    public final String detail;
    public final String stderrTail;
    public final int lines;

    public Outcome(Integer exitCode, String reason, String detail, String stderrTail, int lines) {
        this.exitCode = exitCode;
        this.reason = reason;
        this.detail = detail;
        this.stderrTail = stderrTail;
        this.lines = lines;
    }

    @Override
    public String toString() {
        return "Outcome(" + reason + ", exit " + exitCode + ", " + lines + " lines"
                + (detail == null ? "" : ", " + detail) + ")";
    }
}
