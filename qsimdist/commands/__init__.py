"""The ``qsimdist`` commands, one module per family; :mod:`qsimdist.cli` registers them.

Each command is an adapter: it parses its options, calls the Python API or
the engine, and prints; errors are :class:`~qsimdist.errors.QsimdistError`,
which :mod:`.process` turns into one line and exit code 2. Every option that
more than one command takes is defined once, in :mod:`.common`.
"""
