"""The render job's account, answered inside the job's Python (``install``, called by the worker's job bootstrap).

The jobs' tree has no ``/etc/passwd`` or ``/etc/group``: reading ``/etc/passwd`` is the classic hostile program and
stays ``forbidden``. So glibc knows no entry for the job's ids, and ``pwd.getpwuid(os.getuid())``,
``getpass.getuser()`` without USER / LOGNAME and ``grp.getgrgid(os.getgid())`` raised KeyError, ``Path.home()``
without HOME raised RuntimeError and ``expanduser("~")`` gave ``~`` back: legitimate plotting code crashed.

The wrappers ask the real lookup first and answer for the job's uid / gid / name ``render`` only where it found
nothing; every other id or name gets the real answer (its KeyError). They hold the real functions and the job's
fields, nothing else, and their module imports nothing of the worker: they give a job no way to the worker's state.
"""

import functools
import grp
import operator
import pwd

JOB_USER = "render"
JOB_SHELL = "/usr/sbin/nologin"  # the entry names no shell a job could run (it may not exec anyway)


def job_passwd_entry(uid: int, gid: int, home: str) -> pwd.struct_passwd:
    """The job's passwd entry: ``render``, its ids, the job dir as home, no login shell."""
    return pwd.struct_passwd((JOB_USER, "x", int(uid), int(gid), JOB_USER, str(home), JOB_SHELL))


def job_group_entry(gid: int) -> grp.struct_group:
    """The job's group entry: ``render``, its gid, no members (a fresh list each time, as grp gives)."""
    return grp.struct_group((JOB_USER, "x", int(gid), []))


def _or_job_entry(real, is_job_key, entry_of_job):
    """``real`` (one argument), but a key that ``real`` does not know and ``is_job_key`` accepts is answered by
    ``entry_of_job()``. Errors other than KeyError (a wrong type, a NUL in a name) stay the real ones."""

    @functools.wraps(real)
    def lookup(key, /):
        try:
            return real(key)
        except KeyError:
            if is_job_key(key):
                return entry_of_job()
            raise

    return lookup


def _all_with_job_entry(real_all, id_field, job_id, entry_of_job):
    """``real_all()``, plus the job's entry where no real entry has its id."""

    @functools.wraps(real_all)
    def lookup_all():
        entries = real_all()
        if all(getattr(e, id_field) != job_id for e in entries):
            entries.append(entry_of_job())
        return entries

    return lookup_all


def job_lookups(uid: int, gid: int, home: str) -> dict[tuple[str, str], object]:
    """The wrapped lookups, by (module, function) name, for a job of ``uid`` / ``gid`` whose home is ``home``; the
    real functions are the ones the modules hold now."""
    uid, gid = int(uid), int(gid)
    user = job_passwd_entry(uid, gid, home)  # immutable: one object serves every call

    def user_entry():
        return user

    def group_entry():
        return job_group_entry(gid)

    def is_uid(key):  # the real lookup took it, so it is an integer (or has __index__)
        return operator.index(key) == uid

    def is_gid(key):
        return operator.index(key) == gid

    def is_name(key):
        return isinstance(key, str) and key == JOB_USER

    return {
        ("pwd", "getpwuid"): _or_job_entry(pwd.getpwuid, is_uid, user_entry),
        ("pwd", "getpwnam"): _or_job_entry(pwd.getpwnam, is_name, user_entry),
        ("pwd", "getpwall"): _all_with_job_entry(pwd.getpwall, "pw_uid", uid, user_entry),
        ("grp", "getgrgid"): _or_job_entry(grp.getgrgid, is_gid, group_entry),
        ("grp", "getgrnam"): _or_job_entry(grp.getgrnam, is_name, group_entry),
        ("grp", "getgrall"): _all_with_job_entry(grp.getgrall, "gr_gid", gid, group_entry),
    }


def install(uid: int, gid: int, home: str) -> None:
    """Put ``job_lookups`` in place of pwd's and grp's functions (in the job child, before the job's code runs:
    ``getpass``, ``posixpath.expanduser`` and ``pathlib`` look them up on the modules at each call)."""
    modules = {"pwd": pwd, "grp": grp}
    for (module, name), fn in job_lookups(uid, gid, home).items():
        setattr(modules[module], name, fn)
