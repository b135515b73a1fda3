module example.com/rel

go 1.22
