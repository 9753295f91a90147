"""Everything that runs on the workstation: CLI, transports, result store, orchestration."""
