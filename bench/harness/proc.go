package harness

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of the times in /proc/PID/stat. It is
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// cpuSeconds returns utime+stime of pid plus those of its waited-for
// children (cutime+cstime), in seconds.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields after it start
	// at the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("bad /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime..cstime are fields 14..17.
	if len(f) < 15 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	var ticks int64
	for _, k := range f[11:15] {
		v, err := strconv.ParseInt(k, 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += v
	}
	return float64(ticks) / clockTicks, nil
}

// peakRSS returns VmHWM of pid in bytes: the largest resident set the
// process has had.
func peakRSS(pid int) (int64, error) { return statusBytes(pid, "VmHWM:") }

// statusBytes returns the kB line key (e.g. "VmRSS:") of
// /proc/PID/status in bytes.
func statusBytes(pid int, key string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key); ok {
			fs := strings.Fields(v)
			if len(fs) != 2 || fs[1] != "kB" {
				return 0, fmt.Errorf("bad %s line %q", key, sc.Text())
			}
			kb, err := strconv.ParseInt(fs[0], 10, 64)
			return kb << 10, err
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", key, pid)
}
