package nacoslog_test

import (
	"os"

	nacoslogger "github.com/nacos-group/nacos-sdk-go/v2/common/logger"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rebound-go/rebound/subscriber/nacos/nacoslog"
)

func ExampleInstall() {
	defer nacoslogger.SetLogger(nacoslogger.GetLogger()) // (restore the SDK's logger after the example)
	enc := zapcore.NewJSONEncoder(zapcore.EncoderConfig{MessageKey: "msg", LevelKey: "level", NameKey: "logger",
		EncodeLevel: zapcore.LowercaseLevelEncoder})
	logger := zap.New(zapcore.NewCore(enc, zapcore.AddSync(os.Stdout), zapcore.DebugLevel))

	// After clients.NewNamingClient(...) has returned:
	if err := nacoslog.Install(logger.Named("nacos"), zapcore.WarnLevel); err != nil {
		panic(err)
	}

	// What the SDK logs from now on:
	nacoslogger.Infof("subscribe service %s", "orders") // below Warn: dropped
	nacoslogger.Warnf("login failed, password:[%s]", "hunter2")
	for i := range 3 { // the same call site again within a minute: dropped
		nacoslogger.Warnf("fail to connect server, after trying %d times", i)
	}
	// Output:
	// {"level":"warn","logger":"nacos","msg":"login failed, password:[[REDACTED]]"}
	// {"level":"warn","logger":"nacos","msg":"fail to connect server, after trying 0 times"}
}
