package org.aiot.agent.core;

import java.util.ArrayList;
import java.util.List;

/**
 * How one relayed line is cut into instrumentation status values: a status bundle travels
 * through a binder transaction (about 1 MB in all, shared), so long lines go in chunks the
 * host joins again. Each chunk is one status with {@link #KEY_LINE} and, on all but the last,
 * {@link #KEY_MORE} = "1".
 */
public final class StatusLines {
    /** The status key of a relayed line (or chunk of one). */
    public static final String KEY_LINE = "aiot";
    /** Present ("1") on every chunk but a line's last. */
    public static final String KEY_MORE = "aiot_more";
    /** The largest chunk, in chars. */
    public static final int CHUNK = 16000;

    private StatusLines() {
    }

    /** The chunks of {@code line}, in order (one for a short line; one empty for ""). */
    public static List<String> chunks(String line) {
        List<String> out = new ArrayList<String>();
        for (int start = 0; start < line.length(); start += CHUNK) {
            out.add(line.substring(start, Math.min(line.length(), start + CHUNK)));
        }
        if (out.isEmpty()) {
            out.add("");
        }
        return out;
    }

    /** {@code text} on one line: backslash, CR and LF written out (for result values). */
    public static String oneLine(String text) {
        return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r");
    }
}
