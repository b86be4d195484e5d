"""Reading a skill repo's corpora: finding them, parsing every format under the same limits, validating.

Pure below the I/O edge (``repo``, ``files``, ``interop``): the parsers and validators take text or
parsed JSON and return schema records. Imports nothing else of the producer."""
