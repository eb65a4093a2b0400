"""The console's static files (CSS, the vendored htmx, a little JS), served from here; a
package so that setuptools ships it as one (package data)."""
