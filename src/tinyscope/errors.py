"""Errors a user can act on. The CLI prints their message as one line and exits 2."""


class TinyscopeError(Exception):
    """Base class of errors caused by user input (config, names, files, token ids)."""


class ConfigError(TinyscopeError, ValueError):
    """A configuration value or key is invalid; the message names the field, the value and what is allowed."""


class InputError(TinyscopeError, ValueError):
    """A model or library call was given an input it cannot take (token ids out of range, a
    sequence longer than the context, an empty or wrongly shaped tensor or mask); the message
    names the argument, the bad value and what is allowed."""


class CheckpointError(TinyscopeError):
    """A checkpoint or run directory is missing, incomplete or inconsistent."""


def check(condition: bool, message: str) -> None:
    """Raise :class:`ConfigError` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise ConfigError(message)


def check_choice(field: str, value, allowed) -> None:
    if value not in allowed:
        raise ConfigError(f"{field}={value!r} is not allowed; choose one of {', '.join(map(repr, allowed))}")
