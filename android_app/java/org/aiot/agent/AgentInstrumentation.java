package org.aiot.agent;

import android.app.Activity;
import android.app.Instrumentation;
import android.content.Context;
import android.content.Intent;
import android.content.pm.PackageManager;
import android.os.Bundle;
import android.util.Base64;

import java.io.BufferedReader;
import java.io.FileReader;
import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.aiot.agent.core.AgentRunner;
import org.aiot.agent.core.LineSink;
import org.aiot.agent.core.Outcome;
import org.aiot.agent.core.RunSpec;
import org.aiot.agent.core.StatusLines;

/**
 * The thin Android side: {@code am instrument -w -r -e spec BASE64 org.aiot.agent/.AgentInstrumentation}
 * runs {@link AgentRunner} inside this app's process (its uid, cgroup and cpuset, which the
 * child inherits), with {@link KeepAwakeActivity} in front unless {@code -e foreground 0}, and
 * relays each stdout line of the child as an instrumentation status ({@code aiot=LINE}).
 * The result bundle says how the child ended and which cgroup/cpuset the app ran in.
 */
public class AgentInstrumentation extends Instrumentation {
    /** The status code of a relayed line. */
    public static final int STATUS_LINE = 1;
    /** How long the foreground activity may take to come up before the run goes on without. */
    private static final long FOREGROUND_WAIT_MS = 10000;

    private Bundle arguments;
    private volatile AgentRunner runner;

    @Override
    public void onCreate(Bundle arguments) {
        super.onCreate(arguments);
        this.arguments = arguments == null ? new Bundle() : arguments;
        start();  // onStart() on the instrumentation's own thread
    }

    @Override
    public void onStart() {
        Bundle result = new Bundle();
        int code = Activity.RESULT_OK;
        Activity foreground = null;
        try {
            RunSpec spec = withAppDirs(RunSpec.parse(decodeSpec(arguments.getString("spec"))));
            if (!"0".equals(arguments.getString("foreground"))) {
                foreground = startForeground(result);
            }
            result.putString("aiot_app_version", appVersion());
            result.putString("aiot_cpuset", StatusLines.oneLine(read("/proc/self/cpuset")));
            result.putString("aiot_cgroup", StatusLines.oneLine(read("/proc/self/cgroup")));
            runner = new AgentRunner(spec, new StatusSink());
            Outcome outcome = runner.run();
            result.putString("aiot_reason", outcome.reason);
            result.putString("aiot_exit", String.valueOf(outcome.exitCode));
            result.putString("aiot_lines", String.valueOf(outcome.lines));
            result.putString("aiot_detail", StatusLines.oneLine(String.valueOf(outcome.detail)));
            result.putString("aiot_stderr", StatusLines.oneLine(outcome.stderrTail));
        } catch (Exception ex) {
            code = Activity.RESULT_CANCELED;
            result.putString("aiot_error", StatusLines.oneLine(ex.getClass().getSimpleName() + ": "
                    + ex.getMessage()));
        } finally {
            if (foreground != null) {
                foreground.finish();
            }
        }
        finish(code, result);
    }

    @Override
    public void onDestroy() {
        AgentRunner running = runner;
        if (running != null) {
            running.stop();  // torn down (force-stop, am instrument ended): no orphan agent
        }
        super.onDestroy();
    }

    /**
     * The spec with the app's folders filled in ({@link RunSpec#expand}: the native-library dir
     * the runtime's loader is executed from, the files dir it was staged into) and TMPDIR and
     * HOME in the app's own cache and files folders unless the host set them: an app may not
     * write where the shell user does (/data/local/tmp).
     */
    private RunSpec withAppDirs(RunSpec spec) {
        Context target = getTargetContext();
        Map<String, String> dirs = new LinkedHashMap<String, String>();
        dirs.put("native_lib_dir", target.getApplicationInfo().nativeLibraryDir);
        dirs.put("files_dir", target.getFilesDir().getAbsolutePath());
        dirs.put("cache_dir", target.getCacheDir().getAbsolutePath());
        RunSpec expanded = spec.expand(dirs);
        Map<String, String> env = new LinkedHashMap<String, String>(expanded.env);
        if (!env.containsKey("TMPDIR")) {
            env.put("TMPDIR", dirs.get("cache_dir"));
        }
        if (!env.containsKey("HOME")) {
            env.put("HOME", dirs.get("files_dir"));
        }
        return new RunSpec(expanded.argv, env, expanded.cwd, expanded.timeoutMs);
    }

    private String appVersion() {
        try {
            Context target = getTargetContext();
            return target.getPackageManager().getPackageInfo(target.getPackageName(), 0).versionName;
        } catch (PackageManager.NameNotFoundException ex) {
            return "unknown";
        }
    }

    private static String decodeSpec(String encoded) throws IOException {
        if (encoded == null) {
            throw new IllegalArgumentException("no spec: start with am instrument -e spec BASE64");
        }
        return new String(Base64.decode(encoded, Base64.DEFAULT), "UTF-8");
    }

    /** Brings {@link KeepAwakeActivity} to the front (top-app), waiting at most 10 s. */
    private Activity startForeground(Bundle result) {
        final Intent intent = new Intent(Intent.ACTION_MAIN);
        intent.setClassName(getTargetContext().getPackageName(), KeepAwakeActivity.class.getName());
        intent.addFlags(Intent.FLAG_ACTIVITY_NEW_TASK);
        final Activity[] started = new Activity[1];
        Thread starter = new Thread(new Runnable() {
            @Override
            public void run() {
                try {
                    started[0] = startActivitySync(intent);
                } catch (RuntimeException ex) {
                    started[0] = null;
                }
            }
        }, "aiot-foreground");
        starter.setDaemon(true);
        starter.start();
        try {
            starter.join(FOREGROUND_WAIT_MS);
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
        }
        result.putString("aiot_foreground", started[0] != null ? "1" : "0");
        return started[0];
    }

    private static String read(String path) {
        StringBuilder out = new StringBuilder();
        BufferedReader reader = null;
        try {
            reader = new BufferedReader(new FileReader(path));
            String line;
            while ((line = reader.readLine()) != null) {
                out.append(line).append('\n');
            }
        } catch (IOException ex) {
            return "unreadable: " + ex.getMessage();
        } finally {
            if (reader != null) {
                try {
                    reader.close();
                } catch (IOException ignored) {
                    // nothing to do
                }
            }
        }
        return out.toString().trim();
    }

    /** Each line as one status, or several chunks for a long one. */
    private final class StatusSink implements LineSink {
        @Override
        public void line(String line) {
            List<String> chunks = StatusLines.chunks(line);
            for (int i = 0; i < chunks.size(); i++) {
                Bundle status = new Bundle();
                status.putString(StatusLines.KEY_LINE, chunks.get(i));
                if (i < chunks.size() - 1) {
                    status.putString(StatusLines.KEY_MORE, "1");
                }
                sendStatus(STATUS_LINE, status);
            }
        }
    }
}
