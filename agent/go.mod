module github.com/gridcity/gridcity/agent

go 1.26.8

require github.com/gridcity/gridcity/proto v0.0.0

require (
	github.com/godbus/dbus/v5 v5.2.4 // indirect
	github.com/shirou/gopsutil/v4 v4.26.10 // indirect
	golang.org/x/sys v0.50.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace github.com/gridcity/gridcity/proto => ../proto
