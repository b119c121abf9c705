"""Interactive access to instances: JupyterLab, SSH, volumes, idle autostop."""
