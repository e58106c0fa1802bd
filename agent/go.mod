module github.com/gridcity/gridcity/agent

go 1.26.8

require github.com/gridcity/gridcity/proto v0.0.0

require (
	github.com/godbus/dbus/v5 v5.2.4 // indirect
	github.com/shirou/gopsutil/v4 v4.26.10 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/grpc v1.85.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace github.com/gridcity/gridcity/proto => ../proto
