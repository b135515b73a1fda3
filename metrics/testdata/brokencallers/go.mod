module example.com/brokencallers

go 1.22
