# shellcheck shell=bash
# Functions the job scripts share: checks of their settings, and the output
# directory of a job (its checks, its record, the files a job writes there).
# Sourcing it defines functions and RECORD_NAME only, so a script may source
# it more than once (jobs/slurm.sh, then jobs/common.sh).

die() {
    echo "$(basename "$0"): error: $*" >&2
    exit 2
}

# ---- settings ----------------------------------------------------------------
# Each is checked by a pattern before any arithmetic sees it: bash evaluates
# a variable's value in $((...)) as an expression of its own, subscripts and
# the commands in them included (GPUS_PER_NODE='HOME[$(cmd)]' runs cmd).
# Nine digits at most, so that products stay far inside 64 bits; no leading
# zero, which arithmetic reads as octal.

require_positive() {  # NAME...: each variable a positive integer
    local name
    for name in "$@"; do
        [[ ${!name} =~ ^[1-9][0-9]{0,8}$ ]] ||
            die "$name must be a positive integer (1 to 999999999)," \
                "got '${!name}'"
    done
}

require_count() {  # NAME...: each variable 0 or a positive integer
    local name
    for name in "$@"; do
        [[ ${!name} =~ ^(0|[1-9][0-9]{0,8})$ ]] ||
            die "$name must be a whole number (0 to 999999999)," \
                "got '${!name}'"
    done
}

require_switch() {  # NAME...: each variable 0 or 1
    local name
    for name in "$@"; do
        [[ ${!name} == [01] ]] || die "$name must be 0 or 1, got '${!name}'"
    done
}

# new_local_id: a job id for a run that no scheduler names, unique among
# runs (a process id repeats in every PID namespace): local- and 12 random
# hexadecimal digits (the output directory's name adds the date).
new_local_id() {
    echo "local-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
}

# ---- the output directory ------------------------------------------------------
# A job's output directory holds RECORD_NAME, written by the start that made
# it (the first start of the job):
#
#     job=1234            the scheduler's job id (Slurm's, PBS's, or a local one)
#     cluster=mn1         Slurm's cluster name (SLURM_CLUSTER_NAME), or empty
#     created=1510302600  when (seconds since 1970)
#     start=0 2017-11-10 09:30:00 slurm.sh node001
#
# and one start= line per start after it (Slurm's restart count first). It
# is read as data, never sourced.
RECORD_NAME=job.record

# owned_file PATH: PATH is a regular file (not a link) of this user.
owned_file() {
    [[ -f $1 && ! -L $1 && -O $1 ]]
}

# read_record DIR: RECORD_JOB, RECORD_CLUSTER, RECORD_CREATED and
# RECORD_LAST_START (the restart count of its last start) from DIR's record;
# status 1 where DIR has no record of this user in that form.
read_record() {
    local path=$1/$RECORD_NAME line size
    RECORD_JOB='' RECORD_CLUSTER='' RECORD_CREATED='' RECORD_LAST_START=''
    owned_file "$path" || return 1
    size=$(stat -c %s -- "$path") || return 1
    [[ $size =~ ^[0-9]{1,5}$ ]] || return 1      # under 100 kB
    while IFS= read -r line; do
        case $line in
            job=*) RECORD_JOB=${line#job=} ;;
            cluster=*) RECORD_CLUSTER=${line#cluster=} ;;
            created=*) RECORD_CREATED=${line#created=} ;;
            start=*) RECORD_LAST_START=${line#start=}
                     RECORD_LAST_START=${RECORD_LAST_START%% *} ;;
        esac
    done < "$path"
    [[ -n $RECORD_JOB && $RECORD_CREATED =~ ^(0|[1-9][0-9]{0,17})$ &&
       $RECORD_LAST_START =~ ^(0|[1-9][0-9]{0,8})$ ]]
}

# find_run_of_job ROOT NAME JOB CLUSTER RESTART: FOUND_DIR is the directory
# ROOT/*-NAME whose record names scheduler job JOB on CLUSTER, last started
# before restart RESTART; of several (job ids repeat after a controller
# reset), the one made last. Empty if none.
find_run_of_job() {
    local root=$1 name=$2 job=$3 cluster=$4 restart=$5 dir created=-1
    # shellcheck disable=SC2034  # read by jobs/slurm.sh
    FOUND_DIR=''
    for dir in "$root"/*-"$name"; do
        [[ -d $dir && ! -L $dir ]] || continue
        read_record "$dir" || continue
        [[ $RECORD_JOB == "$job" && $RECORD_CLUSTER == "$cluster" ]] ||
            continue
        ((RECORD_LAST_START < restart && RECORD_CREATED > created)) ||
            continue
        created=$RECORD_CREATED
        # shellcheck disable=SC2034
        FOUND_DIR=$dir
    done
}

# check_out_dir DIR RESUME: refuses (one line, exit 2) a DIR that the job
# must not write to, the way the trainer checks its --out: DIR is new,
# empty, or a run of this project (RECORD_NAME of a job, or the trainer's
# own record args.json), and a run only where RESUME continues it. Never a
# link, never a path with a comma (Open MPI's mpiexec splits --hostfile's
# value there, and PBS's qsub -v its list). Sets OUT_DIR_STATE: new, empty,
# job (a job's run) or run (a run started without these scripts).
check_out_dir() {
    local dir=$1 resume=$2 entry found=()
    [[ $dir != *,* ]] ||
        die "OUT_DIR: '$dir' has a comma, where Open MPI's mpiexec (its" \
            "--hostfile) and PBS's qsub -v split it; choose an OUT_ROOT or" \
            "OUT_DIR without one"
    if [[ -L $dir ]]; then
        die "OUT_DIR: $dir is a symbolic link; give the directory it" \
            "points to"
    elif [[ ! -e $dir ]]; then
        OUT_DIR_STATE=new
        return 0
    elif [[ ! -d $dir ]]; then
        die "OUT_DIR: $dir is not a directory"
    fi
    # What a killed trainer leaves (its lock, temporary files) is no content.
    for entry in "$dir"/* "$dir"/.[!.]* "$dir"/..?*; do
        [[ -e $entry || -L $entry ]] || continue
        entry=${entry##*/}
        [[ $entry =~ ^\.(lock|.+\.tmp[0-9]+(\.png)?)$ ]] ||
            found+=("$entry")
    done
    if ((${#found[@]} == 0)); then
        OUT_DIR_STATE=empty
        return 0
    fi
    if [[ -e $dir/$RECORD_NAME || -L $dir/$RECORD_NAME ]]; then
        owned_file "$dir/$RECORD_NAME" ||
            die "OUT_DIR: $dir/$RECORD_NAME is not a regular file of" \
                "yours; the job writes in no directory that another user's" \
                "job made"
        OUT_DIR_STATE=job
    elif owned_file "$dir/args.json"; then
        OUT_DIR_STATE=run
    else
        die "OUT_DIR: $dir holds files that are no run of this project" \
            "(no $RECORD_NAME or args.json: ${found[*]:0:3}); give a new or" \
            "empty directory"
    fi
    [[ -n $resume ]] ||
        die "OUT_DIR: $dir holds a run; continue it with RESUME=auto, or" \
            "give a new directory"
    # The files a job writes there: its own in a job's run, none in another.
    for entry in launch.sh job.log hostfile; do
        [[ -e $dir/$entry || -L $dir/$entry ]] || continue
        if [[ $OUT_DIR_STATE != job ]] || ! owned_file "$dir/$entry"; then
            die "OUT_DIR: $dir/$entry was not written by a job of these" \
                "scripts (or is no regular file); move it away"
        fi
    done
}

# make_out_dir DIR STATE JOB: creates DIR where STATE is new (a directory
# that appears meanwhile is refused: a first start never shares one), and
# adds this start to its record (creating it), JOB the scheduler's job id.
make_out_dir() {
    local dir=$1 state=$2 job=$3 record=$1/$RECORD_NAME
    if [[ $state == new ]]; then
        mkdir -p -- "$(dirname -- "$dir")" 2>/dev/null ||
            die "OUT_DIR: cannot create the folder above $dir"
        mkdir -- "$dir" 2>/dev/null ||
            die "OUT_DIR: cannot create $dir (it exists now, or the folder" \
                "above it cannot be written)"
    fi
    local start
    start="start=${SLURM_RESTART_COUNT:-0} $(date '+%Y-%m-%d %H:%M:%S')"
    start+=" $(basename "$0") $(hostname)"
    if [[ $state == job ]]; then
        owned_file "$record" ||
            die "OUT_DIR: $record is not a regular file of yours"
        echo "$start" >> "$record"
    else
        (set -o noclobber
         printf '%s\n' "# the job that made this run directory, and each start" \
             "job=$job" "cluster=${SLURM_CLUSTER_NAME:-}" \
             "created=$(date +%s)" "$start" > "$record") 2>/dev/null ||
            die "OUT_DIR: cannot create $record (it exists now, or $dir" \
                "cannot be written)"
    fi
}

# write_job_file DIR NAME LINES...: DIR/NAME holds LINES. A new file is
# created exclusively (noclobber: never through a link, never over a file);
# an existing one (check_out_dir let only a job's own through) is replaced
# by a rename of a new file beside it.
write_job_file() {
    local dir=$1 name=$2 tmp
    shift 2
    if [[ ! -e $dir/$name && ! -L $dir/$name ]]; then
        (set -o noclobber; printf '%s\n' "$@" > "$dir/$name") 2>/dev/null ||
            die "OUT_DIR: cannot create $dir/$name (it exists now?)"
        return 0
    fi
    owned_file "$dir/$name" ||
        die "OUT_DIR: $dir/$name is not a regular file of yours; move it away"
    tmp=$dir/.$name.tmp$$
    (set -o noclobber; printf '%s\n' "$@" > "$tmp") 2>/dev/null ||
        die "OUT_DIR: cannot create $tmp"
    mv -f -T -- "$tmp" "$dir/$name"
}
