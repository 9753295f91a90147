package org.aiot.agent.core;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What the host asks the app to start: {@code {"argv": [...], "env": {...}, "cwd": "...",
 * "timeout_ms": N}} (env, cwd and timeout optional). The app starts exactly this program; it
 * adds nothing of its own, so the shell and app paths run the same agent command.
 *
 * <p>Two things only the app knows are left to it as placeholders the host writes into argv,
 * env values and cwd: {@code {native_lib_dir}} (where Android extracted the APK's
 * {@code lib/<abi>/*.so}: the one place an app targeting API 29+ may execute files from) and
 * {@code {files_dir}}, {@code {cache_dir}} (the app's own folders). {@link #expand} fills them
 * in. An env value of JSON {@code null} removes that variable from what the child inherits.
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
                Object value = entry.getValue();
                env.put(String.valueOf(entry.getKey()), value == null ? null : String.valueOf(value));
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

    /** The placeholders {@link #expand} knows, each without its braces. */
    public static final String[] PLACEHOLDERS = {"native_lib_dir", "files_dir", "cache_dir"};

    /**
     * This spec with each {@code {name}} of {@code dirs} (names from {@link #PLACEHOLDERS})
     * replaced by its value; other braces are left as they are.
     */
    public RunSpec expand(Map<String, String> dirs) {
        Map<String, String> known = new HashMap<String, String>();
        for (String name : PLACEHOLDERS) {
            if (dirs.containsKey(name)) {
                known.put("{" + name + "}", dirs.get(name));
            }
        }
        List<String> newArgv = new ArrayList<String>();
        for (String arg : argv) {
            newArgv.add(fill(arg, known));
        }
        Map<String, String> newEnv = new LinkedHashMap<String, String>();
        for (Map.Entry<String, String> entry : env.entrySet()) {
            newEnv.put(entry.getKey(), entry.getValue() == null ? null : fill(entry.getValue(), known));
        }
        return new RunSpec(newArgv, newEnv, cwd == null ? null : fill(cwd, known), timeoutMs);
    }

    private static String fill(String text, Map<String, String> known) {
        if (text.indexOf('{') < 0) {
            return text;
        }
        String out = text;
        for (Map.Entry<String, String> entry : known.entrySet()) {
            out = out.replace(entry.getKey(), entry.getValue());
        }
        return out;
    }
}
