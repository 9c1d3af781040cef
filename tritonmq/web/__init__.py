"""Files every broker serves over plain HTTP (:mod:`tritonmq.broker.http`).

``index.html`` (the chat page), ``console.html`` and ``console-view.js`` (the web
console) and ``tritonmq.js`` (the JavaScript client) are links to their sources under
``clients/``; a wheel holds copies of them (setuptools follows
the links), so an installed broker serves exactly what was built. ``placeholder.html``
is served at ``/`` when the chat page is not there.
"""
