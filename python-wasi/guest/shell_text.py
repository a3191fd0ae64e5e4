"""Commands of Vivarium's guest shell, loaded into every template as `vivarium_shell_text`
(issue 49; the command API is in `vivarium_shell`). Being written."""

COMMANDS = {}
