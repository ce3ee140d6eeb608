// The MongoDB key store: the shared contract suite against a real server when MONGODB_URL is set.
import { MongoKeyStore } from '../../src/personal-data/mongodb-key-store.js';
import { keyStoreContract } from './key-store-contract.js';

const url = process.env.MONGODB_URL;
if (url) {
  keyStoreContract('MongoDB', () => MongoKeyStore.connect(url));
} else {
  describe('MongoDB key store', function () {
    it('runs the key-store contract suite against a server', function () {
      console.log('skipped: set MONGODB_URL=mongodb://localhost:27017/leadpost_test?directConnection=true to run the MongoDB key-store contract suite');
      this.skip();
    });
  });
}
