// Package streamfilter evaluates AWS Lambda event-filtering patterns against
// DynamoDB stream records, so the Docker-free local host filters exactly as an
// event source mapping does in AWS (where the service filters and this code is
// not deployed). The dispatcher's pattern itself lives with the dispatcher
// (dispatcher.StreamFilterPattern), shared by infra/ and the local host.
package streamfilter
