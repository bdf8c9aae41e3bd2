"""What the framework bridges share: a method that does one thing more after itself, and a
callback added to a framework's list once."""


def run_after(owner, name, then):
    """Makes ``owner.name`` (a method of a framework's class) call ``then(self)`` after
    itself. ``then`` never breaks the framework: what it raises is dropped."""
    original = getattr(owner, name)

    def method(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        try:
            then(self)
        except Exception:
            pass
        return result

    method.__name__ = getattr(original, "__name__", name)
    method.__doc__ = original.__doc__
    method.__wrapped__ = original
    setattr(owner, name, method)


def add_once(callbacks, kind):
    """Appends a new ``kind()`` to a framework's list of callbacks unless one is there."""
    if not any(isinstance(callback, kind) for callback in callbacks):
        callbacks.append(kind())
