"""aiot: measure how neural networks really run on phones and ARM boards.

Sub-packages: ``aiot.host`` (CLI, transports, store), ``aiot.converters`` (artifact formats),
``aiot.models`` (model zoo), ``aiot.device_agent`` (runs on the device).
"""

__version__ = "0.1.0"
