"""Vivarium's shell, loaded into every template as `vivarium_shell` (issue 49): a POSIX shell
that runs inside the sandbox, in Python, over the sandbox's own files. Being written."""

COMMANDS = {}
