package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// connectJava drives kmirror's Connect API with Kafka's own Connect REST
// client (connect-runtime's RestClient, which Connect workers use to
// forward requests to each other) and Connect's entity classes, which
// Jackson fills strictly: a field kmirror names wrongly fails the read.
const connectJava = `
import java.util.*;
import com.fasterxml.jackson.core.type.TypeReference;
import org.apache.kafka.common.config.*;
import org.apache.kafka.connect.runtime.rest.RestClient;
import org.apache.kafka.connect.runtime.rest.entities.*;
import org.apache.kafka.connect.runtime.rest.errors.ConnectRestException;

public class ConnectClient {
    public static void main(String[] args) throws Exception {
        String url = args[0];
        RestClient c = new RestClient(new AbstractConfig(new ConfigDef(), Map.of()));
        ServerInfo si = c.httpRequest(url + "/", "GET", null, null, new TypeReference<ServerInfo>() {}).body();
        System.out.println("server " + (si.version() != null));
        Map<String, String> cfg = new HashMap<>();
        cfg.put("connector.class", "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector");
        cfg.put("source.cluster.alias", args[2]);
        cfg.put("target.cluster.alias", "sz");
        cfg.put("source.cluster.bootstrap.servers", args[1]);
        cfg.put("heartbeats.topic.replication.factor", "1");
        cfg.put("emit.heartbeats.interval.seconds", "1");
        RestClient.HttpResponse<ConnectorInfo> created = c.httpRequest(url + "/connectors", "POST", null,
            new CreateConnectorRequest("java-hb", cfg, null), new TypeReference<ConnectorInfo>() {});
        System.out.println("created " + created.status() + " " + created.body().name() + " " + created.body().type());
        ConnectorStateInfo st = c.httpRequest(url + "/connectors/java-hb/status", "GET", null, null, new TypeReference<ConnectorStateInfo>() {}).body();
        System.out.println("status " + st.connector().state() + " " + st.tasks().size());
        ConnectorOffsets offs = c.httpRequest(url + "/connectors/us-west-source/offsets", "GET", null, null, new TypeReference<ConnectorOffsets>() {}).body();
        // Heartbeats topics are always copied (as MM2 does), and other
        // tests on these clusters make some: count the seed's topic only.
        long n = offs.offsets().stream().filter(o -> {
            String t = String.valueOf(o.partition().get("topic"));
            return !t.equals("heartbeats") && !t.endsWith(".heartbeats");
        }).count();
        System.out.println("offsets " + n);
        List<String> names = c.httpRequest(url + "/connectors", "GET", null, null, new TypeReference<List<String>>() {}).body();
        System.out.println("connectors " + String.join(",", names));
        Map<String, Map<String, ConnectorStateInfo>> exp = c.httpRequest(url + "/connectors?expand=status", "GET", null, null,
            new TypeReference<Map<String, Map<String, ConnectorStateInfo>>>() {}).body();
        System.out.println("expanded " + exp.get("java-hb").get("status").connector().state());
        List<PluginInfo> plugins = c.httpRequest(url + "/connector-plugins", "GET", null, null, new TypeReference<List<PluginInfo>>() {}).body();
        System.out.println("plugins " + plugins.size());
        Map<String, String> bad = new HashMap<>(cfg);
        bad.remove("source.cluster.alias");
        ConfigInfos v = c.httpRequest(url + "/connector-plugins/MirrorHeartbeatConnector/config/validate", "PUT", null, bad,
            new TypeReference<ConfigInfos>() {}).body();
        System.out.println("validate " + v.errorCount());
        try {
            c.httpRequest(url + "/connectors/nope/status", "GET", null, null, new TypeReference<ConnectorStateInfo>() {});
            System.out.println("missing found");
        } catch (ConnectRestException e) {
            System.out.println("missing " + e.statusCode() + " " + e.getMessage());
        }
    }
}
`

// runConnectJava compiles and runs connectJava against url; it returns
// what it printed.
func runConnectJava(t *testing.T, url, bootstrap, alias string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ConnectClient.java"), []byte(connectJava), 0o600); err != nil {
		t.Fatal(err)
	}
	libs := filepath.Join(testkafka.Libs(t), "*")
	if out, err := exec.Command("javac", "-cp", libs, "-d", dir, filepath.Join(dir, "ConnectClient.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	out, err := exec.Command("java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", libs+":"+dir, "ConnectClient", url, bootstrap, alias).CombinedOutput()
	if err != nil {
		t.Fatalf("java ConnectClient: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}
