"""The host's one user-facing error: a runner, shard or lock problem whose
message names the option or folder and the fix (the CLI prints it, exit 2)."""


class RunnerError(RuntimeError):
    pass
