# Compiles the standard library zip to bytecode with this very interpreter.
# Writes /tmp/stdlib.zip: every entry of the original, plus an unchecked
# hash-based .pyc next to each .py (zipimport then loads the bytecode
# without compiling, and tracebacks still find the sources). Stored, not
# deflated: the zip is read straight from memory.
def _rlm_prepare(src="/lib/python314.zip", dst="/tmp/stdlib.zip"):
    import zipfile, importlib.util
    from importlib._bootstrap_external import _code_to_hash_pyc
    done = failed = 0
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        names = set(zin.namelist())
        for info in zin.infolist():
            data = zin.read(info)
            zout.writestr(info.filename, data, compress_type=zipfile.ZIP_STORED)
            if not info.filename.endswith(".py") or info.filename + "c" in names:
                continue
            try:
                code = compile(data, info.filename, "exec", dont_inherit=True)
            except (SyntaxError, ValueError):
                failed += 1
                continue
            pyc = _code_to_hash_pyc(code, importlib.util.source_hash(data), checked=False)
            zi = zipfile.ZipInfo(info.filename + "c", info.date_time)
            zout.writestr(zi, bytes(pyc), compress_type=zipfile.ZIP_STORED)
            done += 1
    print(done, failed)

_rlm_prepare()
del _rlm_prepare
