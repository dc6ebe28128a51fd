package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"time"
)

// httpGet returns the status code and body of a GET of url (0 and the
// error when it fails).
func httpGet(url string) (int, string) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// statusPart is a partition as GET /flows/{name} shows it.
type statusPart struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	State     string `json:"state"`
	Error     string `json:"error"`
}

// flowParts returns the partitions of flow name from the REST API at addr.
func flowParts(addr, name string) []statusPart {
	_, out := httpGet("http://" + addr + "/flows/" + name)
	var st struct {
		Partitions []statusPart `json:"partitions"`
	}
	json.Unmarshal([]byte(out), &st)
	return st.Partitions
}

// metricValue returns the value of the series of metric whose labels
// (name="value" pairs in Prometheus' sorted order, comma-separated) match
// the regular expression labels, from the metrics at addr; -1 if none.
func metricValue(addr, metric, labels string) float64 {
	_, m := httpGet("http://" + addr + "/metrics")
	re := regexp.MustCompile(`(?m)^` + metric + `\{` + labels + `\} (\S+)$`)
	if g := re.FindStringSubmatch(m); g != nil {
		v, _ := strconv.ParseFloat(g[1], 64)
		return v
	}
	return -1
}
