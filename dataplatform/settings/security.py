"""Security: the secret key, hosts, cookies, the proxies whose headers are believed, the Content-Security-Policy."""

from csp.constants import NONE, SELF

from .core import DEBUG
from .env import env_ip_networks, env_list, env_str

# The embedded default key is only for a local demo; production must set SECRET_KEY.
SECRET_KEY = env_str("SECRET_KEY", "embedded-mode-insecure-key-set-SECRET_KEY-in-production")
if not DEBUG and SECRET_KEY.startswith("embedded-mode-insecure"):
    raise RuntimeError("SECRET_KEY must be set when DEBUG is off.")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = not DEBUG
CSRF_COOKIE_SECURE = not DEBUG
LANGUAGE_COOKIE_SECURE = not DEBUG
LANGUAGE_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
# The reverse proxies in front of the web server (addresses or networks), empty when clients connect
# to it directly. Only from these does the web server (dataplatform/webserver.py) believe
# X-Forwarded-For, the client address of the brute-force limits and the audit log, and
# X-Forwarded-Proto, the scheme behind request.is_secure(). Django takes both from the server (the ASGI
# scope's client and scheme). Not SECURE_PROXY_SSL_HEADER: with it Django would believe
# X-Forwarded-Proto from any address, a client that reaches the server past the proxy included.
TRUSTED_PROXIES = env_ip_networks("TRUSTED_PROXIES")
# No inline script or style anywhere: model text can never become code.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
    }
}
