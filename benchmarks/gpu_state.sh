# Sourced by the device scripts (device_day19.sh, sendlag.sh): the GPU's settings, and the report that
# a run left the GPU and the host as it found them.

# One line per GPU: what a run must not change (compute mode, MIG mode, persistence).
gpu_settings() {
  command -v nvidia-smi >/dev/null || { echo "no GPU (no nvidia-smi on this host)"; return; }
  nvidia-smi --query-gpu=index,uuid,name,driver_version,compute_mode,mig.mode.current,persistence_mode \
    --format=csv,noheader
}

# gpu_check HEADLINE BEFORE AFTER: the check.txt lines (settings before and after, what is left running).
gpu_check() {
  echo "$1"
  echo "GPU before: $2"
  echo "GPU after:  $3"
  [ "$2" = "$3" ] && echo "settings unchanged: yes" || echo "settings unchanged: NO"
  local servers fronts mps apps
  servers=$(pgrep -af "bench_plugin[.]servers" || true)
  fronts=$(pgrep -af "bench_plugin[.]sharing[.]front" || true)
  mps=$(pgrep -af "nvidia-cuda-mps" || true)
  apps=$(command -v nvidia-smi >/dev/null && nvidia-smi --query-compute-apps=pid,process_name,used_memory \
    --format=csv,noheader)
  echo "server processes left: ${servers:-none}"
  echo "front processes left: ${fronts:-none}"
  echo "MPS processes left: ${mps:-none}"
  echo "compute processes on the GPU: ${apps:-none}"
}
