package org.aiot.agent.core;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What the host asks the app to start: {@code {"argv": [...], "env": {...}, "cwd": "...",
 * "timeout_ms": N}} (env, cwd and timeout optional). The app starts exactly this program; it
 * adds nothing of its own, so the shell and app paths run the same agent command.
 */
public final class RunSpec {
    /** Without a timeout in the spec, a child may run this long before it is killed. */
    public static final long DEFAULT_TIMEOUT_MS = 30L * 60L * 1000L;

    public final List<String> argv;
    public final Map<String, String> env;
    public final String cwd;
    public final long timeoutMs;

    public RunSpec(List<String> argv, Map<String, String> env, String cwd, long timeoutMs) {
        if (argv == null || argv.isEmpty()) {
            throw new IllegalArgumentException("spec has no argv");
        }
        this.argv = Collections.unmodifiableList(new ArrayList<String>(argv));
        this.env = Collections.unmodifiableMap(new LinkedHashMap<String, String>(env));
        this.cwd = cwd;
        this.timeoutMs = timeoutMs;
    }

    /** The spec in {@code json}; IllegalArgumentException says what is wrong with it. */
    public static RunSpec parse(String json) {
        Object root = Json.parse(json);
        if (!(root instanceof Map)) {
            throw new IllegalArgumentException("spec is not a JSON object");
        }
        Map<?, ?> map = (Map<?, ?>) root;
        Object rawArgv = map.get("argv");
        if (!(rawArgv instanceof List)) {
            throw new IllegalArgumentException("spec.argv is not a list");
        }
        List<String> argv = new ArrayList<String>();
        for (Object item : (List<?>) rawArgv) {
            if (!(item instanceof String)) {
                throw new IllegalArgumentException("spec.argv holds a non-string");
            }
            argv.add((String) item);
        }
        Map<String, String> env = new LinkedHashMap<String, String>();
        Object rawEnv = map.get("env");
        if (rawEnv instanceof Map) {
            for (Map.Entry<?, ?> entry : ((Map<?, ?>) rawEnv).entrySet()) {
                env.put(String.valueOf(entry.getKey()), String.valueOf(entry.getValue()));
            }
        } else if (rawEnv != null) {
            throw new IllegalArgumentException("spec.env is not an object");
        }
        Object cwd = map.get("cwd");
        Object timeout = map.get("timeout_ms");
        long timeoutMs = timeout instanceof Number ? ((Number) timeout).longValue() : DEFAULT_TIMEOUT_MS;
        if (timeoutMs <= 0) {
            throw new IllegalArgumentException("spec.timeout_ms must be > 0");
        }
        return new RunSpec(argv, env, cwd instanceof String ? (String) cwd : null, timeoutMs);
    }
}
