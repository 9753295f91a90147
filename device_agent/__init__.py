"""The aiot device agent.

Runs on the device with only the standard library plus the runtime it drives (and NumPy,
which every runtime brings). It uses relative imports only, so the same files run as the
top-level ``device_agent`` package on a board and as ``aiot.device_agent`` on the host.
"""

AGENT_VERSION = "0.7.0"
