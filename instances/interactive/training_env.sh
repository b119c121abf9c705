# gpu-portal: the Python the portal trains with, first on PATH in every shell of an instance.
#
# Installed as /etc/profile.d/gpu-portal-training.sh in the instance image (instances/backends/Dockerfile), so
# login shells (JupyterLab's terminals in a pod, SSH logins) get it after /etc/profile reset PATH; sourced by
# the start file of the local backend's interactive shells (instances/interactive/shell_env.py). The folder
# comes from GPU_PORTAL_TRAINING_BIN (the image's ENV, sshd's SetEnv, the local backend's environment);
# without it nothing changes. POSIX sh: dash, bash and busybox read it alike.
if [ -n "${GPU_PORTAL_TRAINING_BIN:-}" ]; then
    case ":${PATH:-}:" in
        ":${GPU_PORTAL_TRAINING_BIN}:"*) ;;
        *) PATH="${GPU_PORTAL_TRAINING_BIN}${PATH:+:$PATH}" ;;
    esac
    export PATH
fi
