module github.com/gridcity/gridcity/coordinator

go 1.26.8

require github.com/gridcity/gridcity/proto v0.0.0

replace github.com/gridcity/gridcity/proto => ../proto
