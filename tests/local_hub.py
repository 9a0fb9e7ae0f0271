"""A hub endpoint on localhost that answers every request 404 (no such repository): a hub that can be reached, for
the tests of what happens after mmevo's reachability check (``mmevo.models.loader.check_hub_reachable``)."""

import contextlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextlib.contextmanager
def hub_without_the_repo():
    """Yields (its URL, the ``"METHOD path"`` of each request it got)."""
    asked: list[str] = []

    class NoSuchRepo(BaseHTTPRequestHandler):
        def _answer(self):
            asked.append(f"{self.command} {self.path}")
            self.send_response(404)
            self.send_header("X-Error-Code", "RepoNotFound")
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_HEAD = do_GET = _answer

        def log_message(self, *args):  # not on the test's stderr
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), NoSuchRepo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", asked
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def reachable_hub(monkeypatch):
    """This process's huggingface_hub online and pointed at ``hub_without_the_repo`` (its endpoint, URL template and
    offline flag are read at import, so they are patched, not set in the environment); yields the requests it got."""
    import huggingface_hub.constants as constants

    with hub_without_the_repo() as (url, asked):
        monkeypatch.setattr(constants, "ENDPOINT", url)
        monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", url + "/{repo_id}/resolve/{revision}/{filename}")
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        yield asked
