"""qfx's error classes, one per kind of failure, as the C++ library raises them.

Each class mirrors the C++ class of the same name in ``qfx/error.h`` and carries
the exit code the ``qfx`` command uses for it, so a script that switches on
``qfx ptq``'s exit status and one that catches these exceptions see the same
cases. The message is the C++ message, unchanged: it names the file, key
(``file:line:column``), node or tensor involved.
"""


class Error(Exception):
    """Any error qfx raises on purpose (exit code 2)."""

    exit_code = 2


class ConfigError(Error):
    """Bad configuration: YAML syntax, an unknown key, a wrong type or value, a
    qconfig the backend cannot honour (exit code 3)."""

    exit_code = 3


class TraceError(Error):
    """The model cannot be captured as a graph: data-dependent control flow,
    module mutation, an unsupported construct (exit code 4)."""

    exit_code = 4


class UnsupportedOpError(Error):
    """An operator outside what qfx supports; the message names node and op
    (exit code 5)."""

    exit_code = 5


class DataError(Error):
    """Bad data: NaN / Inf, shapes or dtypes that do not fit the model,
    inconsistent labels (exit code 6)."""

    exit_code = 6


class IoError(Error):
    """A file that cannot be read, parsed or written; names the path (exit
    code 7)."""

    exit_code = 7


class ExecutionError(Error):
    """Running the graph failed inside an op for these inputs; names the node
    (exit code 8)."""

    exit_code = 8


class ReferenceCheckError(Error):
    """The int8 model's outputs differ from the reference backend's where they
    must be identical (``qfx ptq``'s exit code 9). ``result`` holds the
    :class:`qfx.PtqResult` of the run, whose files were written."""

    exit_code = 9

    def __init__(self, message, result=None):
        super().__init__(message)
        self.result = result


class DistributedError(Error):
    """A multi-process run failed: a rank died, hung or could not join (exit
    code 10)."""

    exit_code = 10


class ArgumentError(Error, ValueError):
    """A library call got an argument outside its documented contract; names
    the function and the argument (exit code 11)."""

    exit_code = 11


class InternalError(Error):
    """A broken invariant inside qfx: a bug, not bad input (exit code 1)."""

    exit_code = 1


_BY_EXIT_CODE = {c.exit_code: c for c in (Error, ConfigError, TraceError, UnsupportedOpError, DataError, IoError,
                                           ExecutionError, ReferenceCheckError, DistributedError, ArgumentError,
                                           InternalError)}


def error_class(exit_code):
    """The class of the C++ error with ``exit_code`` (qfx::Error::exit_code());
    :class:`Error` for a code no class has."""
    return _BY_EXIT_CODE.get(int(exit_code), Error)
