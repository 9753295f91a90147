package org.aiot.agent;

import android.app.Activity;
import android.os.Bundle;
import android.view.WindowManager;
import android.widget.TextView;

/**
 * A plain activity kept in front while the agent runs: it makes the app the top app (its
 * process, and the agent it started, in the top-app cgroup with its boosts) and keeps the
 * screen on, as a user's app would be while it runs a model.
 */
public class KeepAwakeActivity extends Activity {
    @Override
    protected void onCreate(Bundle savedInstanceState) {
        super.onCreate(savedInstanceState);
        getWindow().addFlags(WindowManager.LayoutParams.FLAG_KEEP_SCREEN_ON
                | WindowManager.LayoutParams.FLAG_TURN_SCREEN_ON
                | WindowManager.LayoutParams.FLAG_SHOW_WHEN_LOCKED);
        TextView text = new TextView(this);
        text.setText("aiot is measuring a model; this screen closes when it is done.");
        setContentView(text);
    }
}
