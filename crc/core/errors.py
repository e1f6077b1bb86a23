"""The one exception family of the project."""


class CRCError(ValueError):
    """Invalid input or state: a bad data file, schema, statistics vector or option.

    Messages name the offending thing (file, column, value) so that the
    command-line interface can print them as a single line.
    """


class OptionConflict(CRCError):
    """Options that cannot go together, each valid alone: on the command line, a usage error (exit status 2)."""
