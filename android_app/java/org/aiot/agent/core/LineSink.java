package org.aiot.agent.core;

import java.io.IOException;

/** Where the child's stdout lines go (the instrumentation's status output, or a test list). */
public interface LineSink {
    /**
     * One stdout line of the child, without its newline.
     *
     * @throws IOException the host is gone: the runner kills the child and stops relaying.
     */
    void line(String line) throws IOException;
}
