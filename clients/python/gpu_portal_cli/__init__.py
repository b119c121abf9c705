"""The ``gpu-portal`` command line, built on the generated :mod:`gpu_portal_client`."""
